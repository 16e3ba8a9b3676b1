<?php
// Register (Olio's AddPerson): GET shows the form; the multipart POST adds
// the person with an address, stores the photo in the file store and makes
// its thumbnail with GD.
require __DIR__ . '/common.php';

$user = session_user();
if ($_SERVER['REQUEST_METHOD'] !== 'POST') {
    page_head('Register', $user);
    echo "<form action=\"addPerson.php\" method=\"post\" enctype=\"multipart/form-data\">\n";
    foreach (['user_name' => 'User name', 'password' => 'Password', 'passwordx' => 'Password again', 'first_name' => 'First name',
        'last_name' => 'Last name', 'email' => 'E-mail', 'telephone' => 'Telephone', 'timezone' => 'Time zone',
        'street1' => 'Street', 'street2' => 'Street (2)', 'city' => 'City', 'state' => 'State', 'zip' => 'Zip',
        'country' => 'Country'] as $f => $label) {
        echo "<p><label>", h($label), " <input type=\"text\" name=\"$f\"></label></p>\n";
    }
    echo "<p><label>Summary <textarea name=\"summary\"></textarea></label></p>\n",
        "<p><label>Photo <input type=\"file\" name=\"user_image\"></label></p>\n<p><input type=\"submit\" value=\"Register\"></p>\n</form>\n";
    page_foot();
    exit;
}

$name = str_param('user_name', true, 25);
$password = str_param('password', true, 25);
if ($password !== str_param('passwordx', true, 25)) {
    fail(400, 'the two passwords differ');
}
$first = str_param('first_name', true, 25);
$last = str_param('last_name', true, 25);
$email = str_param('email', true, 90);
$phone = str_param('telephone', true, 25);
$tz = str_param('timezone', true, 100);
$summary = str_param('summary', false, 2500);
$addr = [str_param('street1', true, 55), str_param('street2', false, 55), str_param('city', true, 55),
    str_param('state', true, 25), str_param('zip', true, 12), str_param('country', true, 55)];
if (row('SELECT userid FROM person WHERE username = ?', [$name]) !== null) {
    fail(409, "user name $name is taken");
}

db()->begin_transaction();
$aid = exec_sql(
    'INSERT INTO address (street1, street2, city, state, zip, country, latitude, longitude) VALUES (?, ?, ?, ?, ?, ?, 0, 0)',
    $addr
);
$uid = exec_sql(
    "INSERT INTO person (username, password, firstname, lastname, email, telephone, imageurl, imagethumburl, summary, timezone, address_addressid)"
    . " VALUES (?, ?, ?, ?, ?, ?, '', '', ?, ?, ?)",
    [$name, $password, $first, $last, $email, $phone, $summary, $tz, $aid]
);
$image = "p$uid.jpg";
$thumb = "p{$uid}t.jpg";
save_upload('user_image', $image, $thumb);
exec_sql('UPDATE person SET imageurl = ?, imagethumburl = ? WHERE userid = ?', [$image, $thumb, $uid]);
db()->commit();

page_head('Registered', $user);
echo "<p>Welcome to Olio, <a href=\"users.php?username=", urlencode($name), "\"><span id=\"added-person\">", h($name), "</span></a>.</p>\n";
page_foot();
