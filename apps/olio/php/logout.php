<?php
// Logout: forgets the session's user.
require __DIR__ . '/common.php';

session_user();
$_SESSION = [];
session_destroy();
header('Location: index.php', true, 302);
echo "Logged out\n";
