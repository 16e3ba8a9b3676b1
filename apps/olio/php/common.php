<?php
// Shared code of nearnative's Olio site (apps/olio): database access,
// sessions, the page layout and error reporting. Every failure ends the
// request with an HTTP error status and a line starting with OLIO-ERROR, so
// that the load driver counts it with its cause.
declare(strict_types=1);

function fail(int $status, string $msg): never
{
    if (!headers_sent()) {
        http_response_code($status);
        header('Content-Type: text/plain; charset=utf-8');
    }
    echo "\nOLIO-ERROR: ", $msg, "\n";
    exit;
}

set_exception_handler(function (Throwable $e): void {
    error_log('olio: ' . $_SERVER['REQUEST_URI'] . ': ' . $e);
    fail(500, get_class($e) . ': ' . $e->getMessage());
});
// Warnings and notices are failures too: a page that works only half is a
// failed operation.
set_error_handler(function (int $no, string $str, string $file, int $line): bool {
    throw new ErrorException($str, 0, $no, $file, $line);
});

function db(): mysqli
{
    static $db = null;
    if ($db === null) {
        mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        $db = new mysqli(
            (string)getenv('OLIO_DB_HOST'),
            (string)getenv('OLIO_DB_USER'),
            (string)getenv('OLIO_DB_PASSWORD'),
            (string)getenv('OLIO_DB_NAME'),
            (int)getenv('OLIO_DB_PORT')
        );
        $db->set_charset('utf8mb4');
    }
    return $db;
}

/** @return list<array<string,mixed>> */
function rows(string $sql, array $params = []): array
{
    return db()->execute_query($sql, $params)->fetch_all(MYSQLI_ASSOC);
}

function row(string $sql, array $params = []): ?array
{
    $r = db()->execute_query($sql, $params)->fetch_assoc();
    return $r === false ? null : $r;
}

function exec_sql(string $sql, array $params = []): int
{
    db()->execute_query($sql, $params);
    return (int)db()->insert_id;
}

function h(mixed $s): string
{
    return htmlspecialchars((string)$s, ENT_QUOTES | ENT_HTML5, 'UTF-8');
}

/** The site's "today" (apps/olio Epoch): upcoming events start on or after it. */
function today(): string
{
    return getenv('OLIO_TODAY') . ' 00:00:00';
}

function files_dir(): string
{
    return (string)getenv('OLIO_FILES');
}

/** The logged-in user's name, or null. */
function session_user(): ?string
{
    if (session_status() !== PHP_SESSION_ACTIVE) {
        session_start();
    }
    $u = $_SESSION['uname'] ?? null;
    return is_string($u) ? $u : null;
}

function int_param(string $name, int $default, int $min, int $max): int
{
    $v = $_GET[$name] ?? $_POST[$name] ?? null;
    if ($v === null || $v === '') {
        return $default;
    }
    if (!is_string($v) || !ctype_digit($v)) {
        fail(400, "parameter $name must be a number");
    }
    return max($min, min($max, (int)$v));
}

function str_param(string $name, bool $required = true, int $maxLen = 2500): string
{
    $v = $_POST[$name] ?? $_GET[$name] ?? '';
    if (!is_string($v)) {
        fail(400, "parameter $name must be text");
    }
    $v = trim($v);
    if ($required && $v === '') {
        fail(400, "parameter $name is missing");
    }
    if (strlen($v) > $maxLen) {
        fail(400, "parameter $name is longer than $maxLen characters");
    }
    return $v;
}

/** The statics every page references (Olio's pages reference ~18). */
const STATICS_CSS = ['site.css', 'layout.css'];
const STATICS_JS = ['prototype.js', 'effects.js', 'dragdrop.js', 'controls.js', 'builder.js', 'application.js'];

function page_head(string $title, ?string $user): void
{
    header('Content-Type: text/html; charset=utf-8');
    echo "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Olio - ", h($title), "</title>\n";
    foreach (STATICS_CSS as $f) {
        echo "<link rel=\"stylesheet\" href=\"/static/css/$f\">\n";
    }
    foreach (STATICS_JS as $f) {
        echo "<script src=\"/static/js/$f\"></script>\n";
    }
    echo "</head>\n<body>\n<div id=\"header\"><img src=\"/static/img/header_bg.png\" alt=\"\" class=\"bg\">\n",
        "<a href=\"index.php\"><img src=\"/static/img/logo.png\" alt=\"Olio\"></a>\n",
        "<a href=\"index.php\" class=\"rss\"><img src=\"/static/img/rss.png\" alt=\"RSS\"></a></div>\n",
        "<div id=\"nav\"><img src=\"/static/img/tab_left.png\" alt=\"\"><a href=\"index.php\">Home</a> | ",
        "<a href=\"addEvent.php\">Add event</a> | <a href=\"addPerson.php\">Register</a>",
        "<img src=\"/static/img/tab_right.png\" alt=\"\"></div>\n<div id=\"userbox\">";
    if ($user !== null) {
        echo "Welcome, <span id=\"loggedin\">", h($user), "</span> | <a href=\"users.php?username=", urlencode($user), "\">Profile</a>";
    } else {
        echo "<form action=\"login.php\" method=\"post\">User name <input type=\"text\" name=\"user_name\" size=\"12\"> ",
            "Password <input type=\"password\" name=\"password\" size=\"12\"> <input type=\"submit\" value=\"Log in\"></form>";
    }
    echo "</div>\n<div id=\"search\"><form action=\"taggedEvents.php\" method=\"get\"><img src=\"/static/img/search.png\" alt=\"Search\">",
        " <input type=\"text\" name=\"tag\"> <input type=\"submit\" value=\"Find tag\"></form></div>\n<div id=\"content\">\n",
        "<h1>", h($title), "</h1>\n";
}

function page_foot(): void
{
    echo "</div>\n<div id=\"legend\">Rating: <img src=\"/static/img/star_on.png\" alt=\"*\"> ",
        "<img src=\"/static/img/star_half.png\" alt=\"+\"> <img src=\"/static/img/star_off.png\" alt=\"-\"></div>\n",
        "<div id=\"footer\"><img src=\"/static/img/footer_bg.png\" alt=\"\"> Olio social events, as re-implemented by nearnative</div>\n",
        "</body>\n</html>\n";
}

/** Event rows with their thumbnails (home page and tag search). */
function event_list(array $events): void
{
    if (!$events) {
        echo "<p id=\"noevents\">No events.</p>\n";
        return;
    }
    echo "<ul class=\"events\">\n";
    foreach ($events as $e) {
        $id = (int)$e['socialeventid'];
        echo "<li class=\"event\" data-event=\"$id\"><a href=\"events.php?socialEventID=$id\">",
            "<img src=\"/files/", h($e['imagethumburl']), "\" alt=\"\" class=\"thumb\"> ", h($e['title']), "</a> ",
            "<span class=\"when\">", h($e['eventtimestamp']), "</span> <span class=\"summary\">", h($e['summary']), "</span> ",
            "by <a href=\"users.php?username=", urlencode((string)$e['submittername']), "\">", h($e['submittername']), "</a></li>\n";
    }
    echo "</ul>\n";
}

function tag_cloud(int $n): void
{
    $tags = rows('SELECT tag, refcount FROM socialeventtag ORDER BY refcount DESC LIMIT ' . $n);
    echo "<div id=\"tagcloud\">\n";
    foreach ($tags as $t) {
        $size = min(24, 9 + intdiv((int)$t['refcount'], 2));
        echo "<a href=\"taggedEvents.php?tag=", urlencode((string)$t['tag']), "\" style=\"font-size:{$size}px\">", h($t['tag']), "</a>\n";
    }
    echo "</div>\n";
}

/**
 * Saves an uploaded JPEG as $name in the file store and, when $thumb is
 * given, a thumbnail made with GD that fits 133x100 pixels.
 */
function save_upload(string $field, string $name, ?string $thumb = null): void
{
    $f = $_FILES[$field] ?? null;
    if (!is_array($f) || ($f['error'] ?? UPLOAD_ERR_NO_FILE) !== UPLOAD_ERR_OK) {
        fail(400, "upload $field is missing or failed (error " . (is_array($f) ? (int)$f['error'] : UPLOAD_ERR_NO_FILE) . ')');
    }
    $dst = files_dir() . '/' . $name;
    if (!move_uploaded_file($f['tmp_name'], $dst)) {
        fail(500, "cannot store upload $field as $dst");
    }
    if ($thumb === null) {
        return;
    }
    $img = imagecreatefromjpeg($dst);
    $w = imagesx($img);
    $hgt = imagesy($img);
    $scale = min(133 / $w, 100 / $hgt, 1.0);
    $tw = max(1, (int)round($w * $scale));
    $th = max(1, (int)round($hgt * $scale));
    $t = imagecreatetruecolor($tw, $th);
    imagecopyresampled($t, $img, 0, 0, 0, 0, $tw, $th, $w, $hgt);
    imagejpeg($t, files_dir() . '/' . $thumb, 80);
}
