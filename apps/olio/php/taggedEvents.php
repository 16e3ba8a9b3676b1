<?php
// Tag search: the events carrying a tag, ten a page, newest first, with
// their thumbnails, and a tag cloud of the count most used tags (Olio's
// driver sends count = 100..150).
require __DIR__ . '/common.php';

$user = session_user();
$tag = str_param('tag', true, 50);
$count = int_param('count', 50, 1, 500);
$page = int_param('page', 0, 0, 1000);
$t = row('SELECT socialeventtagid FROM socialeventtag WHERE tag = ?', [$tag]);
$events = [];
if ($t !== null) {
    $events = rows(
        'SELECT e.socialeventid, e.title, e.summary, e.imagethumburl, e.eventtimestamp, e.submittername'
        . ' FROM socialeventtag_socialevent st JOIN socialevent e ON e.socialeventid = st.socialeventid'
        . ' WHERE st.socialeventtagid = ? ORDER BY e.eventtimestamp DESC LIMIT 10 OFFSET ' . ($page * 10),
        [(int)$t['socialeventtagid']]
    );
}
page_head('Events tagged ' . $tag, $user);
event_list($events);
tag_cloud($count);
page_foot();
