<?php
// Person detail: the person's photo, details and summary, friends with
// their thumbnails, and the upcoming events they attend.
require __DIR__ . '/common.php';

$user = session_user();
$name = str_param('username', true, 25);
$p = row(
    'SELECT p.*, a.city, a.state, a.country FROM person p JOIN address a ON a.addressid = p.address_addressid WHERE p.username = ?',
    [$name]
);
if ($p === null) {
    fail(404, "no person $name");
}
$friends = rows(
    'SELECT p.username, p.imagethumburl FROM person_person f JOIN person p ON p.userid = f.friends_userid'
    . ' WHERE f.person_userid = ? AND f.is_accepted = 1 LIMIT 8',
    [(int)$p['userid']]
);
$nfriends = (int)row('SELECT COUNT(*) AS n FROM person_person WHERE person_userid = ?', [(int)$p['userid']])['n'];
$events = rows(
    'SELECT e.socialeventid, e.title, e.eventtimestamp FROM person_socialevent pe JOIN socialevent e ON e.socialeventid = pe.socialeventid'
    . ' WHERE pe.username = ? AND e.eventtimestamp >= ? ORDER BY e.eventtimestamp LIMIT 5',
    [$name, today()]
);

page_head($p['firstname'] . ' ' . $p['lastname'], $user);
echo "<div class=\"person\" data-user=\"", h($p['username']), "\">\n<img src=\"/files/", h($p['imageurl']), "\" alt=\"\" class=\"image\">\n",
    "<p>", h($p['username']), ", ", h($p['email']), ", ", h($p['telephone']), ", ", h($p['city']), ", ", h($p['state']), ", ",
    h($p['country']), " (", h($p['timezone']), ")</p>\n<p class=\"summary\">", h($p['summary']), "</p>\n",
    "<div id=\"friends\">$nfriends friends:";
foreach ($friends as $f) {
    echo " <a href=\"users.php?username=", urlencode((string)$f['username']), "\"><img src=\"/files/", h($f['imagethumburl']),
        "\" alt=\"\" class=\"thumb\"> ", h($f['username']), "</a>";
}
echo "</div>\n<div id=\"upcoming\">Attending:";
foreach ($events as $e) {
    echo " <a href=\"events.php?socialEventID=", (int)$e['socialeventid'], "\">", h($e['title']), "</a> (", h($e['eventtimestamp']), ")";
}
echo "</div>\n</div>\n";
page_foot();
