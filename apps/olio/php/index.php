<?php
// Home page: the upcoming events, ten a page, with their thumbnails, and
// the tag cloud.
require __DIR__ . '/common.php';

$user = session_user();
$page = int_param('page', 0, 0, 1000);
$events = rows(
    'SELECT socialeventid, title, summary, imagethumburl, eventtimestamp, submittername FROM socialevent'
    . ' WHERE eventtimestamp >= ? ORDER BY eventtimestamp LIMIT 10 OFFSET ' . ($page * 10),
    [today()]
);
page_head('Upcoming events', $user);
event_list($events);
echo "<p class=\"pages\"><a href=\"index.php?page=", $page + 1, "\">Next page</a></p>\n";
tag_cloud(50);
page_foot();
