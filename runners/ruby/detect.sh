# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
exec ruby - <<'RB'
# gem name => what to require; each must load, or the build fails.
libs = {
  "json" => "json", "csv" => "csv", "bigdecimal" => "bigdecimal", "set" => "set",
  "date" => "date", "psych" => "yaml", "openssl" => "openssl", "digest" => "digest",
  "stringio" => "stringio", "matrix" => "matrix", "prime" => "prime",
  "rexml" => "rexml/document", "minitest" => "minitest", "net-http" => "net/http",
  "sqlite3" => "sqlite3",
}
pairs = libs.map do |gem, path|
  require path
  "#{gem} #{Gem::Specification.find_by_name(gem).version}"
end
v = RUBY_VERSION
puts "version=#{v}"
puts "libraries=#{pairs.join(",")}"
puts "description=Ruby #{v.split(".")[0, 2].join(".")} with its standard gems: json, csv, bigdecimal, set, date, " \
     "yaml (psych), openssl, matrix, prime, rexml, minitest, net/http; and sqlite3. Save files to /data to return them."
RB
