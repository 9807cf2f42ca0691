# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
# The libraries are the dependencies of runners/typescript/package.json, each
# imported from /node_modules (fails if one does not load).
# shellcheck disable=SC2016 # JavaScript, not shell
exec bun -e '
const fs = require("fs");
const manifest = "/usr/local/share/mcp-sandboxd/package.json";
const names = Object.keys(JSON.parse(fs.readFileSync(manifest, "utf8")).dependencies);
const pairs = [];
for (const name of names.sort()) {
  await import(name);
  const pkg = JSON.parse(fs.readFileSync(`/node_modules/${name}/package.json`, "utf8"));
  pairs.push(`${name} ${pkg.version}`);
}
const short = Bun.version.split(".").slice(0, 2).join(".");
console.log(`version=${Bun.version}`);
console.log(`libraries=${pairs.join(",")}`);
console.log(`description=TypeScript/JavaScript on Bun ${short} (Node.js-compatible APIs) with ${names.join(", ")}. Save files to /data to return them.`);
'
