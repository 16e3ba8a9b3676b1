<?php
// Login: checks the user name and password and keeps the user in the
// session, then sends the browser back to the home page.
require __DIR__ . '/common.php';

if ($_SERVER['REQUEST_METHOD'] !== 'POST') {
    fail(405, 'login.php takes a POST');
}
$name = str_param('user_name', true, 25);
$password = str_param('password', true, 25);
$p = row('SELECT username FROM person WHERE username = ? AND password = ?', [$name, $password]);
if ($p === null) {
    fail(401, "wrong user name or password for $name");
}
session_user();
session_regenerate_id(true);
$_SESSION['uname'] = $p['username'];
header('Location: index.php', true, 302);
echo "Logged in as ", h($p['username']), "\n";
