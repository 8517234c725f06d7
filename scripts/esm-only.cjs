// The "require" condition of package.json "exports": proclease is an ES module
// only, so a require() gets this message instead of ERR_PACKAGE_PATH_NOT_EXPORTED.
"use strict";
const err = new Error(
  'proclease is ESM-only: use `import { ... } from "proclease"`, or from CommonJS `const proclease = await import("proclease")`.',
);
err.code = "ERR_REQUIRE_ESM";
throw err;
