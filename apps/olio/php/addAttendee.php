<?php
// Attend: records the logged-in user as an attendee of an event and
// returns the updated attendee list (Olio fetched it in the background).
require __DIR__ . '/common.php';

$user = session_user();
if ($user === null) {
    fail(403, 'addAttendee.php needs a logged-in user');
}
$id = int_param('socialEventID', 0, 0, PHP_INT_MAX);
if (row('SELECT socialeventid FROM socialevent WHERE socialeventid = ?', [$id]) === null) {
    fail(404, "no event $id");
}
exec_sql('INSERT IGNORE INTO person_socialevent (socialeventid, username) VALUES (?, ?)', [$id, $user]);
$n = (int)row('SELECT COUNT(*) AS n FROM person_socialevent WHERE socialeventid = ?', [$id])['n'];
$attendees = rows('SELECT username FROM person_socialevent WHERE socialeventid = ? LIMIT 20', [$id]);
header('Content-Type: text/html; charset=utf-8');
echo "<div id=\"attendees\"><span id=\"attendcount\">$n</span> attending:";
foreach ($attendees as $a) {
    echo " <a href=\"users.php?username=", urlencode((string)$a['username']), "\">", h($a['username']), "</a>";
}
echo "</div>\n<p id=\"attending\">You are attending.</p>\n";
