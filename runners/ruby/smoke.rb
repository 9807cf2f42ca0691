# build.sh smoke test: run as /sandbox/main.rb through sandbox.command.
require "bigdecimal"
require "csv"
require "json"
require "matrix"
require "prime"
require "set"
require "sqlite3"
require "yaml"

rows = [%w[name n], ["a", 1], ["b", 2]]
File.write("/data/smoke.csv", rows.map(&:to_csv).join)
table = CSV.read("/data/smoke.csv", headers: true, converters: :numeric)
raise "csv" unless table.sum { |r| r["n"] } == 3
raise "json" unless JSON.parse(JSON.generate({ "x" => [1, 2] }))["x"] == [1, 2]
raise "yaml" unless YAML.safe_load("a: [1, 2]") == { "a" => [1, 2] }
raise "bigdecimal" unless (BigDecimal("0.1") + BigDecimal("0.2")).to_s == "0.3e0"
raise "matrix" unless Matrix[[1, 2], [3, 4]].determinant == -2
raise "prime" unless Prime.first(5) == [2, 3, 5, 7, 11]
raise "set" unless Set[1, 2] | Set[2, 3] == Set[1, 2, 3]
db = SQLite3::Database.new(":memory:")
raise "sqlite3" unless db.execute("select 40 + 2").first.first == 42
puts "uid #{Process.uid} cwd #{Dir.pwd}"
puts "smoke ok"
