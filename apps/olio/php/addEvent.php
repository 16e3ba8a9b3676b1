<?php
// Add event (a logged-in user): GET shows the form; the multipart POST adds
// the event with its address and tags (each tag's reference count goes up),
// stores the image, a GD thumbnail and the document in the file store.
require __DIR__ . '/common.php';

$user = session_user();
if ($user === null) {
    fail(403, 'addEvent.php needs a logged-in user');
}
if ($_SERVER['REQUEST_METHOD'] !== 'POST') {
    page_head('Add event', $user);
    echo "<form action=\"addEvent.php\" method=\"post\" enctype=\"multipart/form-data\">\n";
    foreach (['title' => 'Title', 'summary' => 'Summary', 'telephone' => 'Telephone', 'timezone' => 'Time zone',
        'year' => 'Year', 'month' => 'Month', 'day' => 'Day', 'hour' => 'Hour', 'minute' => 'Minute',
        'street1' => 'Street', 'street2' => 'Street (2)', 'city' => 'City', 'state' => 'State', 'zip' => 'Zip',
        'country' => 'Country', 'tags' => 'Tags (separated by spaces)'] as $f => $label) {
        echo "<p><label>", h($label), " <input type=\"text\" name=\"$f\"></label></p>\n";
    }
    echo "<p><label>Description <textarea name=\"description\"></textarea></label></p>\n",
        "<p><label>Image <input type=\"file\" name=\"upload_event_image\"></label></p>\n",
        "<p><label>Document <input type=\"file\" name=\"upload_event_literature\"></label></p>\n",
        "<p><input type=\"submit\" value=\"Add event\"></p>\n</form>\n";
    page_foot();
    exit;
}

$title = str_param('title', true, 100);
$summary = str_param('summary', true, 100);
$description = str_param('description', true, 500);
$phone = str_param('telephone', true, 25);
$tz = str_param('timezone', true, 100);
$y = int_param('year', 0, 1970, 2100);
$mo = int_param('month', 0, 1, 12);
$d = int_param('day', 0, 1, 31);
$hr = int_param('hour', 0, 0, 23);
$mi = int_param('minute', 0, 0, 59);
if (!checkdate($mo, $d, $y)) {
    fail(400, "no such date $y-$mo-$d");
}
$when = sprintf('%04d-%02d-%02d %02d:%02d:00', $y, $mo, $d, $hr, $mi);
$addr = [str_param('street1', true, 55), str_param('street2', false, 55), str_param('city', true, 55),
    str_param('state', true, 25), str_param('zip', true, 12), str_param('country', true, 55)];
$tags = array_values(array_unique(preg_split('/\s+/', str_param('tags', true, 400), -1, PREG_SPLIT_NO_EMPTY)));
// Tag rows are locked in name order, so that concurrent AddEvents sharing
// tags cannot deadlock.
sort($tags, SORT_STRING);
foreach ($tags as $t) {
    if (strlen($t) > 50) {
        fail(400, 'a tag is longer than 50 characters');
    }
}

db()->begin_transaction();
$aid = exec_sql(
    'INSERT INTO address (street1, street2, city, state, zip, country, latitude, longitude) VALUES (?, ?, ?, ?, ?, ?, 0, 0)',
    $addr
);
$eid = exec_sql(
    "INSERT INTO socialevent (title, description, submittername, imageurl, imagethumburl, literatureurl, telephone, timezone,"
    . " eventtimestamp, eventdate, summary, createdtimestamp, address_addressid, totalscore, numberofvotes)"
    . " VALUES (?, ?, ?, '', '', '', ?, ?, ?, ?, ?, NOW(), ?, 0, 0)",
    [$title, $description, $user, $phone, $tz, $when, substr($when, 0, 10), $summary, $aid]
);
foreach ($tags as $t) {
    // LAST_INSERT_ID(id) makes insert_id the tag's id whether it was new or not.
    $tid = exec_sql(
        'INSERT INTO socialeventtag (tag, refcount) VALUES (?, 1)'
        . ' ON DUPLICATE KEY UPDATE refcount = refcount + 1, socialeventtagid = LAST_INSERT_ID(socialeventtagid)',
        [$t]
    );
    exec_sql('INSERT INTO socialeventtag_socialevent (socialeventtagid, socialeventid) VALUES (?, ?)', [$tid, $eid]);
}
$image = "e$eid.jpg";
$thumb = "e{$eid}t.jpg";
$doc = "e$eid.pdf";
save_upload('upload_event_image', $image, $thumb);
save_upload('upload_event_literature', $doc);
exec_sql('UPDATE socialevent SET imageurl = ?, imagethumburl = ?, literatureurl = ? WHERE socialeventid = ?', [$image, $thumb, $doc, $eid]);
db()->commit();

page_head('Event added', $user);
echo "<p>Added <a href=\"events.php?socialEventID=$eid\">event <span id=\"added-event\">$eid</span></a> with ", count($tags), " tags.</p>\n";
page_foot();
