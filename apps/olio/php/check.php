<?php
// Readiness: the PHP extensions the site needs, the directories it writes
// and the database. Answers "OK olio" or fails with every problem found.
require __DIR__ . '/common.php';

$problems = [];
foreach (['mysqli' => 'php8.2-mysql', 'gd' => 'php8.2-gd', 'session' => 'php8.2-common'] as $ext => $pkg) {
    if (!extension_loaded($ext)) {
        $problems[] = "PHP extension $ext is not loaded (install $pkg)";
    }
}
if (extension_loaded('gd') && !(imagetypes() & IMG_JPG)) {
    $problems[] = "PHP's GD has no JPEG support";
}
foreach (['files' => files_dir(), 'sessions' => (string)ini_get('session.save_path'), 'upload temp' => (string)ini_get('upload_tmp_dir')] as $what => $dir) {
    if ($dir === '' || !is_dir($dir) || !is_writable($dir)) {
        $problems[] = "the $what directory \"$dir\" is not writable by PHP-FPM's user";
    }
}
if ($problems) {
    fail(500, implode('; ', $problems));
}
$n = (int)row('SELECT COUNT(*) AS n FROM socialeventtag')['n'];
header('Content-Type: text/plain; charset=utf-8');
echo "OK olio tags=$n\n";
