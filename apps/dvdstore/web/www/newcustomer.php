<?php
// New customer: the registration form's POST. A taken user name is a page
// with class "taken" (the client picks another name).
require __DIR__ . '/common.php';
if ($_SERVER['REQUEST_METHOD'] !== 'POST') {
    ds_fail(405, 'error', 'POST the registration form');
}
$p = $_POST;
$args = [
    ds_str($p, 'firstname', 50), ds_str($p, 'lastname', 50), ds_str($p, 'address1', 50), ds_str($p, 'address2', 50, true),
    ds_str($p, 'city', 50), ds_str($p, 'state', 50, true), null, ds_str($p, 'country', 50), ds_int($p, 'region', 1, 2),
    ds_str($p, 'email', 50, true), ds_str($p, 'phone', 50, true), ds_int($p, 'creditcardtype', 1, 5),
    ds_str($p, 'creditcard', 50), ds_str($p, 'creditcardexpiration', 50), ds_str($p, 'username', 50),
    ds_str($p, 'password', 50), ds_int($p, 'age', 18, 120), ds_int($p, 'income', 0, 10000000), ds_str($p, 'gender', 1),
];
if (($p['zip'] ?? '') !== '') {
    $args[6] = ds_int($p, 'zip', 0, 99999);
}
if ($args[5] === '') {
    $args[5] = null;
}
$res = ds_query('SELECT new_customer($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)', $args);
$id = (int) pg_fetch_result($res, 0, 0);
if ($id === 0) {
    ds_fail(200, 'taken', 'User name ' . $args[14] . ' is taken, please choose another');
}
ds_page_start('registered');
echo '<p>Welcome, ', h($args[14]), ' (customer <span class="customerid">', $id, "</span>)</p>\n";
ds_page_end();
