# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
# shellcheck disable=SC2016 # PHP, not shell
exec php -r '
$exts = ["json", "mbstring", "ctype", "iconv", "dom", "simplexml", "xmlreader",
         "bcmath", "intl", "gmp", "sqlite3", "pdo_sqlite", "zlib", "openssl"];
$pairs = [];
foreach ($exts as $e) {
    if (!extension_loaded($e)) {
        fwrite(STDERR, "extension $e is not loaded\n");
        exit(1);
    }
    $pairs[] = "$e " . phpversion($e);
}
$pairs[] = "icu " . INTL_ICU_VERSION;
$pairs[] = "libxml2 " . LIBXML_DOTTED_VERSION;
$pairs[] = "sqlite " . SQLite3::version()["versionString"];
if (ini_get("display_errors") !== "" && ini_get("display_errors") !== "0" || ini_get("log_errors") !== "1") {
    fwrite(STDERR, "errors would not go to stderr: display_errors=" . ini_get("display_errors") . "\n");
    exit(1);
}
$v = PHP_VERSION;
echo "version=$v\n";
echo "libraries=" . implode(",", $pairs) . "\n";
echo "description=PHP " . PHP_MAJOR_VERSION . "." . PHP_MINOR_VERSION . " CLI with mbstring, dom/simplexml/xmlreader, bcmath, intl, gmp, sqlite3 and PDO (sqlite). The opening <?php tag is optional; errors and warnings go to stderr. Save files to /data to return them.\n";
'
