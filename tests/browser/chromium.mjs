// How every browser test starts its browser: Debian's chromium (CHROMIUM overrides the path; never a downloaded
// browser), headless, without background traffic. `resolveLoopbackOnly` also makes every name but loopback resolve
// to nothing, so no request can leave the machine even where Playwright's request interception must stay off (it
// answers CORS preflights itself, and the gateway's CORS tests are about the preflights).

import { chromium } from "playwright-core";

export function launchChromium({ resolveLoopbackOnly = false } = {}) {
  const args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"];
  if (resolveLoopbackOnly) {
    args.push("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost");
  }
  return chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true, args });
}
