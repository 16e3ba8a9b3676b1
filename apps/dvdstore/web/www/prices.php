<?php
// Prices of the items in a cart (ids=1,2,3): the lookup before a purchase.
require __DIR__ . '/common.php';
$ids = ds_int_list(['ids' => explode(',', ds_str($_GET, 'ids', 200))], 'ids', 10, 1, 2147483647);
$res = ds_query('SELECT prod_id, price FROM products WHERE prod_id = ANY($1::integer[])', [ds_pg_array($ids)]);
ds_page_start('prices');
echo "<table class=\"prices\">\n";
while (($row = pg_fetch_row($res)) !== false) {
    echo '<tr><td class="prod_id">', (int) $row[0], '</td><td class="price">', h($row[1]), "</td></tr>\n";
}
echo "</table>\n";
ds_page_end();
