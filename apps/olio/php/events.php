<?php
// Event detail: the event with its image, document, address, tags,
// attendees and comments; a logged-in user who does not attend yet gets an
// Attend link (addAttendee.php).
require __DIR__ . '/common.php';

$user = session_user();
$id = int_param('socialEventID', 0, 0, PHP_INT_MAX);
$e = row(
    'SELECT e.*, a.street1, a.street2, a.city, a.state, a.zip, a.country, a.latitude, a.longitude'
    . ' FROM socialevent e JOIN address a ON a.addressid = e.address_addressid WHERE e.socialeventid = ?',
    [$id]
);
if ($e === null) {
    fail(404, "no event $id");
}
$tags = rows(
    'SELECT t.tag FROM socialeventtag_socialevent st JOIN socialeventtag t ON t.socialeventtagid = st.socialeventtagid'
    . ' WHERE st.socialeventid = ? ORDER BY t.tag',
    [$id]
);
$attendees = rows('SELECT username FROM person_socialevent WHERE socialeventid = ? LIMIT 20', [$id]);
$nattend = (int)row('SELECT COUNT(*) AS n FROM person_socialevent WHERE socialeventid = ?', [$id])['n'];
$comments = rows('SELECT username, comments, ratings, created_at FROM comments_rating WHERE socialeventid = ? ORDER BY created_at', [$id]);
$attending = $user !== null && row('SELECT 1 AS x FROM person_socialevent WHERE socialeventid = ? AND username = ?', [$id, $user]) !== null;

page_head((string)$e['title'], $user);
echo "<div class=\"event\" data-event=\"$id\">\n<img src=\"/files/", h($e['imageurl']), "\" alt=\"\" class=\"image\">\n",
    "<p class=\"when\">", h($e['eventtimestamp']), " (", h($e['timezone']), ")</p>\n",
    "<p class=\"summary\">", h($e['summary']), "</p>\n<p class=\"description\">", h($e['description']), "</p>\n",
    "<p class=\"address\"><img src=\"/static/img/map.png\" alt=\"Map\"> ", h($e['street1']), " ", h($e['street2']), ", ",
    h($e['city']), ", ", h($e['state']), " ", h($e['zip']), ", ", h($e['country']), " (", h($e['latitude']), ", ", h($e['longitude']), ")</p>\n",
    "<p>Phone ", h($e['telephone']), ". Submitted by <a href=\"users.php?username=", urlencode((string)$e['submittername']), "\">",
    h($e['submittername']), "</a>. <a href=\"/files/", h($e['literatureurl']), "\">Event document (PDF)</a></p>\n",
    "<p class=\"rating\">Rating ", (int)$e['numberofvotes'] > 0 ? round((int)$e['totalscore'] / (int)$e['numberofvotes'], 1) : '-',
    " from ", (int)$e['numberofvotes'], " votes</p>\n<p class=\"tags\">Tags:";
foreach ($tags as $t) {
    echo " <a href=\"taggedEvents.php?tag=", urlencode((string)$t['tag']), "\">", h($t['tag']), "</a>";
}
echo "</p>\n<div id=\"attendees\"><img src=\"/static/img/attend.png\" alt=\"\"> <span id=\"attendcount\">$nattend</span> attending:";
foreach ($attendees as $a) {
    echo " <a href=\"users.php?username=", urlencode((string)$a['username']), "\">", h($a['username']), "</a>";
}
echo "</div>\n";
if ($attending) {
    echo "<p id=\"attending\">You are attending.</p>\n";
} elseif ($user !== null) {
    echo "<p><a id=\"attend\" href=\"addAttendee.php?socialEventID=$id\">Attend</a></p>\n";
}
echo "<div id=\"comments\"><img src=\"/static/img/comment.png\" alt=\"\"> ", count($comments), " comments\n";
foreach ($comments as $c) {
    echo "<div class=\"comment\"><b>", h($c['username']), "</b> (", (int)$c['ratings'], "/5, ", h($c['created_at']), "): ", h($c['comments']), "</div>\n";
}
echo "</div>\n</div>\n";
page_foot();
