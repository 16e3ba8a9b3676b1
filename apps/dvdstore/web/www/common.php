<?php
// Shared by every DVD Store page: the database connection (one persistent
// connection per Apache process), query helpers that turn database errors
// into pages the driver recognises, and parameter checks.
//
// Every failure is a page with an element of class "error" (or "rollback"
// for an order refused for short stock) carrying the SQLSTATE, and an HTTP
// status: 400 bad parameters, 500 a database error, 503 no database or a
// deadlock (SQLSTATE 40P01, which the driver retries), 200 for a rollback
// (the shop worked; the order was refused).
declare(strict_types=1);
require __DIR__ . '/config.php';

function h(?string $s): string {
    return htmlspecialchars($s ?? '', ENT_QUOTES | ENT_HTML5, 'UTF-8');
}

function ds_page_start(string $title): void {
    header('Content-Type: text/html; charset=utf-8');
    header('Cache-Control: no-store');
    echo "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>DVD Store: ", h($title), "</title></head><body>\n";
    echo "<h1>DVD Store</h1>\n";
}

function ds_page_end(): void {
    echo "</body></html>\n";
}

function ds_fail(int $status, string $class, string $message, string $sqlstate = ''): never {
    http_response_code($status);
    ds_page_start($class);
    echo '<p class="', h($class), '" data-sqlstate="', h($sqlstate), '">', h($message), "</p>\n";
    ds_page_end();
    exit;
}

function ds_db() {
    static $db = null;
    if ($db !== null) {
        return $db;
    }
    $c = @pg_pconnect(DS_DSN);
    if ($c === false) {
        ds_fail(503, 'error', 'cannot connect to the database');
    }
    if (pg_connection_status($c) !== PGSQL_CONNECTION_OK && !pg_connection_reset($c)) {
        ds_fail(503, 'error', 'the database connection is broken');
    }
    $db = $c;
    return $db;
}

// ds_query runs one statement with parameters in its own transaction and
// returns the result; a database error ends the page (see above).
function ds_query(string $sql, array $params) {
    $db = ds_db();
    if (!pg_send_query_params($db, $sql, $params)) {
        ds_fail(500, 'error', pg_last_error($db));
    }
    $res = pg_get_result($db);
    while (pg_get_result($db) !== false) {
    }
    if ($res === false) {
        ds_fail(500, 'error', 'no result: ' . pg_last_error($db));
    }
    if (pg_result_status($res) === PGSQL_FATAL_ERROR) {
        $state = (string) pg_result_error_field($res, PGSQL_DIAG_SQLSTATE);
        $msg = (string) pg_result_error_field($res, PGSQL_DIAG_MESSAGE_PRIMARY);
        if ($state === 'DS001') {
            ds_fail(200, 'rollback', $msg, $state);
        }
        ds_fail($state === '40P01' ? 503 : 500, 'error', $msg, $state);
    }
    return $res;
}

function ds_int(array $src, string $name, int $min, int $max): int {
    $v = filter_var($src[$name] ?? null, FILTER_VALIDATE_INT, ['options' => ['min_range' => $min, 'max_range' => $max]]);
    if ($v === false) {
        ds_fail(400, 'error', "parameter $name: want an integer from $min to $max");
    }
    return $v;
}

function ds_str(array $src, string $name, int $maxlen, bool $empty = false): string {
    $v = $src[$name] ?? null;
    if (!is_string($v) || strlen($v) > $maxlen || (!$empty && $v === '')) {
        ds_fail(400, 'error', "parameter $name: want text of at most $maxlen characters");
    }
    return $v;
}

function ds_money(array $src, string $name): string {
    $v = $src[$name] ?? null;
    if (!is_string($v) || !preg_match('/^\d{1,10}\.\d{2}$/', $v)) {
        ds_fail(400, 'error', "parameter $name: want an amount such as 12.34");
    }
    return $v;
}

// ds_int_list reads name[] as 1 to $max integers from $min to $imax.
function ds_int_list(array $src, string $name, int $max, int $min, int $imax): array {
    $v = $src[$name] ?? null;
    if (!is_array($v) || count($v) < 1 || count($v) > $max) {
        ds_fail(400, 'error', "parameter {$name}[]: want 1 to $max values");
    }
    $out = [];
    foreach (array_values($v) as $i => $x) {
        $n = filter_var($x, FILTER_VALIDATE_INT, ['options' => ['min_range' => $min, 'max_range' => $imax]]);
        if ($n === false) {
            ds_fail(400, 'error', "parameter {$name}[$i]: want an integer from $min to $imax");
        }
        $out[] = $n;
    }
    return $out;
}

function ds_pg_array(array $ints): string {
    return '{' . implode(',', $ints) . '}';
}
