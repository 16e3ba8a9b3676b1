<?php
// The readiness page: answers once Apache, PHP and the database all work.
require __DIR__ . '/common.php';
$res = ds_query('SELECT count(*) FROM categories', []);
ds_page_start('ready');
echo '<p class="ready">', (int) pg_fetch_result($res, 0, 0), " categories</p>\n";
ds_page_end();
