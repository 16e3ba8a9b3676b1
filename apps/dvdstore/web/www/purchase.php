<?php
// Purchase: the order form's POST. purchase() checks each line's stock and
// rolls the whole order back when one is short (a "rollback" page).
require __DIR__ . '/common.php';
if ($_SERVER['REQUEST_METHOD'] !== 'POST') {
    ds_fail(405, 'error', 'POST the order form');
}
$p = $_POST;
$customer = ds_int($p, 'customerid', 1, 2147483647);
$items = ds_int_list($p, 'prod_id', 10, 1, 2147483647);
$quantities = ds_int_list($p, 'quantity', 10, 1, 1000);
if (count($items) !== count($quantities)) {
    ds_fail(400, 'error', 'prod_id[] and quantity[] differ in length');
}
$res = ds_query('SELECT purchase($1, $2, $3, $4, $5::integer[], $6::integer[])', [
    $customer, ds_money($p, 'netamount'), ds_money($p, 'taxamount'), ds_money($p, 'totalamount'),
    ds_pg_array($items), ds_pg_array($quantities),
]);
ds_page_start('order');
echo '<p>Thank you. Order <span class="orderid">', (int) pg_fetch_result($res, 0, 0), '</span> of ', count($items),
    ' items, total $', h($p['totalamount']), ", is on its way.</p>\n";
ds_page_end();
