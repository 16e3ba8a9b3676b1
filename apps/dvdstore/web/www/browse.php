<?php
// Browse: specials of a category, or a full-text search by actor or title.
require __DIR__ . '/common.php';
$type = ds_str($_GET, 'type', 10);
$batch = ds_int($_GET, 'batch', 1, 100);
switch ($type) {
case 'category':
    $res = ds_query('SELECT prod_id, category, title, actor, price, special FROM browse_by_category($1, $2)',
        [ds_int($_GET, 'value', 1, 1000), $batch]);
    break;
case 'actor':
    $res = ds_query('SELECT prod_id, category, title, actor, price, special FROM browse_by_actor($1, $2)',
        [ds_str($_GET, 'value', 50), $batch]);
    break;
case 'title':
    $res = ds_query('SELECT prod_id, category, title, actor, price, special FROM browse_by_title($1, $2)',
        [ds_str($_GET, 'value', 50), $batch]);
    break;
default:
    ds_fail(400, 'error', 'parameter type: want category, actor or title');
}
ds_page_start('browse');
echo '<p>Found <span class="count">', pg_num_rows($res), "</span> items</p>\n";
echo "<table class=\"results\">\n<tr><th>Item</th><th>Category</th><th>Title</th><th>Actor</th><th>Price</th><th></th></tr>\n";
while (($row = pg_fetch_row($res)) !== false) {
    echo '<tr class="item"><td class="prod_id">', (int) $row[0], '</td><td>', (int) $row[1], '</td><td>', h($row[2]), '</td><td>', h($row[3]),
        '</td><td class="price">', h($row[4]), '</td><td>', $row[5] === '1' ? 'special' : '', "</td></tr>\n";
}
echo "</table>\n";
ds_page_end();
