<?php
// Login: the customer's id and their recent purchases, each with a related
// title ("people who liked this also liked").
require __DIR__ . '/common.php';
$username = ds_str($_GET, 'username', 50);
$password = ds_str($_GET, 'password', 50);
$res = ds_query('SELECT customerid, title, actor, related_title FROM login($1, $2)', [$username, $password]);
if (pg_num_rows($res) === 0) {
    ds_fail(200, 'error', 'Username/password incorrect');
}
ds_page_start('welcome');
echo '<p>Welcome back, ', h($username), ' (customer <span class="customerid">', (int) pg_fetch_result($res, 0, 0), "</span>)</p>\n";
echo "<table class=\"history\">\n<tr><th>Title</th><th>Actor</th><th>People who liked this also liked</th></tr>\n";
while (($row = pg_fetch_row($res)) !== false) {
    if ($row[1] === null) {
        continue;
    }
    echo '<tr class="purchase"><td>', h($row[1]), '</td><td>', h($row[2]), '</td><td>', h($row[3]), "</td></tr>\n";
}
echo "</table>\n";
ds_page_end();
