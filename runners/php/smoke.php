<?php
// build.sh smoke test: run as /sandbox/main.php through sandbox.command.
declare(strict_types=1);

function check(bool $ok, string $what): void
{
    if (!$ok) {
        fwrite(STDERR, "failed: $what\n");
        exit(1);
    }
}

$rows = [["name", "n"], ["a", 1], ["b", 2]];
$f = fopen("/data/smoke.csv", "w");
foreach ($rows as $r) {
    fputcsv($f, $r);
}
fclose($f);
$sum = 0;
$f = fopen("/data/smoke.csv", "r");
fgetcsv($f);
while (($r = fgetcsv($f)) !== false) {
    $sum += (int) $r[1];
}
fclose($f);
check($sum === 3, "csv");
check(json_decode(json_encode(["x" => [1, 2]]), true)["x"] === [1, 2], "json");
check(mb_strlen("héllo") === 5, "mbstring");
check(bcadd("0.1", "0.2", 1) === "0.3", "bcmath");
check(gmp_strval(gmp_pow(2, 100)) === "1267650600228229401496703205376", "gmp");
check((new NumberFormatter("de_DE", NumberFormatter::DECIMAL))->format(1234.5) === "1.234,5", "intl");
check((string) simplexml_load_string("<a><b>hi</b></a>")->b === "hi", "simplexml");
$db = new PDO("sqlite::memory:");
check((int) $db->query("select 40 + 2")->fetchColumn() === 42, "pdo_sqlite");
echo "uid ", posix_getuid(), " cwd ", getcwd(), "\n";
echo "smoke ok\n";
