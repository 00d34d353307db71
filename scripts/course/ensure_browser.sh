#!/usr/bin/env bash
# Chromium and chromedriver for tests/tooling/test_site.py (the course site in a real headless browser).
# Installs Debian's packages when run as root (CI, containers); otherwise says how, and the test skips.
set -u
if command -v chromedriver >/dev/null && { command -v chromium >/dev/null || command -v google-chrome >/dev/null; }; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing chromium and chromedriver for the site test (apt-get)"
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; then
    exit 0
  fi
  echo "WARNING: apt-get could not install chromium: tests/tooling/test_site.py will be skipped"
else
  echo "NOTE: no chromium/chromedriver and not root: tests/tooling/test_site.py will be skipped" \
       "(install them with: sudo apt-get install chromium chromium-driver)"
fi
exit 0
