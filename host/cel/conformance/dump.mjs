// Writes the cel-spec conformance tests (the `simple` suite: one entry per testdata file, its sections and their
// tests in the protobuf JSON form of cel.expr.conformance.test.SimpleTest) to the file named by the first
// argument. host/cel/tests/conformance.rs runs this once, after `npm ci` here.
import { writeFileSync } from "node:fs";

import { tests } from "@bufbuild/cel-spec/testdata/conformance.js";

const files = tests.suites.map((file) => ({
  name: file.name,
  sections: (file.suites ?? []).map((section) => ({
    name: section.name,
    tests: (section.tests ?? []).map((test) => test.original),
  })),
}));
writeFileSync(process.argv[2], JSON.stringify(files));
