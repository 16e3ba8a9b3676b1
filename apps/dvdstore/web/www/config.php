<?php
// The database of the site (virtual host) serving this request: httpd.conf
// sets DS_DSN per virtual host.
$dsn = $_SERVER['DS_DSN'] ?? '';
if (!is_string($dsn) || $dsn === '') {
    http_response_code(500);
    echo "<p class=\"error\" data-sqlstate=\"\">no database configured for this site (DS_DSN)</p>\n";
    exit;
}
define('DS_DSN', $dsn);
