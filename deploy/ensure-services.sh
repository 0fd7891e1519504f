#!/usr/bin/env bash
# Make the real services the tests use available, as far as this machine allows:
# - PostgreSQL and Redis: started when installed but down.
# - Chromium (admin browser tests): installed from Debian's packages when missing and we may.
# - wrk (the admin and API load test): installed the same way.
# - Tesseract with its Chinese data (chapter images read by OCR, fingerprint/ocr.py): installed the same way.
# - A CJK font (fonts-wqy-microhei, else fonts-noto-cjk), so that Chinese renders in the browser tests'
#   screenshots and in takedown notices printed to PDF: installed the same way.
# - openssl (the evidence tests run their own RFC 3161 time-stamping authority with `openssl ts`): installed
#   the same way.
# A service that is not installed at all is left alone: its tests are skipped with the reason,
# except under CI=true, where tests/conftest.py turns a missing service into a failure.
set -u

say() { printf 'ensure-services: %s\n' "$*"; }

pg_up() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
redis_up() { (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; }

if pg_up; then
  say "PostgreSQL is up on 127.0.0.1:5432"
elif command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  say "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || say "could not start PostgreSQL"
  for _ in $(seq 1 30); do pg_up && break; sleep 0.5; done
else
  say "PostgreSQL is not installed: its tests will be skipped (or fail under CI=true)"
fi

if redis_up; then
  say "Redis is up on 127.0.0.1:6379"
elif command -v redis-server >/dev/null 2>&1; then
  say "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || say "could not start Redis"
  for _ in $(seq 1 30); do redis_up && break; sleep 0.2; done
else
  say "Redis is not installed: its tests will be skipped (or fail under CI=true)"
fi

# ensure_packages CHECK FOUND USE LOST PACKAGES...: when CHECK (a shell command) fails, install Debian's PACKAGES
# with apt-get (as root; the package index updated first when it is stale), saying what they serve (USE) and what
# is lost without them (LOST); FOUND is said when CHECK passes
ensure_packages() {
  check=$1 found=$2 use=$3 lost=$4
  shift 4
  if sh -c "$check" >/dev/null 2>&1; then
    say "$found"
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's $* ($use)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>/tmp/fptrack-apt.log 2>&1 \
      || { DEBIAN_FRONTEND=noninteractive apt-get update -q >>/tmp/fptrack-apt.log 2>&1 \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>/tmp/fptrack-apt.log 2>&1; } \
      || say "could not install $* (see /tmp/fptrack-apt.log): $lost"
  else
    say "$* is not installed (apt-get install $*): $lost"
  fi
}

ensure_packages "command -v chromium" "Chromium found at $(command -v chromium)" \
  "JS rendering of crawled pages, the evidence screenshot, the admin browser tests" \
  "browser tests will be skipped" chromium
ensure_packages "ldconfig -p | grep -q 'libarchive\.so\.13'" "libarchive found (7z and rar downloads)" \
  "7z and rar downloads read by the crawler, docs/downloads.md" "7z and rar downloads will not be read" \
  libarchive13
OCR_PACKAGES="tesseract-ocr tesseract-ocr-chi-sim tesseract-ocr-chi-tra"
# shellcheck disable=SC2086
ensure_packages "tesseract --list-langs | grep -q '^chi_sim\$'" "Tesseract found at $(command -v tesseract)" \
  "chapter images read by OCR, docs/downloads.md" "chapter images will not be read" $OCR_PACKAGES
ensure_packages "command -v wrk" "wrk found at $(command -v wrk)" \
  "the admin and API load test, tests/reliability/test_admin_load.py" "the admin load test will be skipped" wrk
ensure_packages "command -v openssl" "openssl found at $(command -v openssl)" \
  "the evidence tests' local time-stamping authority" "the evidence time-stamping tests will fail" openssl
has_cjk_font() { command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh family 2>/dev/null | head -n1)" ]; }

if has_cjk_font; then
  say "CJK font found: $(fc-list :lang=zh family | head -n1)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  say "installing a CJK font (fonts-wqy-microhei) for screenshots and PDF notices"
  for font in fonts-wqy-microhei fonts-noto-cjk; do
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$font" >>/tmp/fptrack-apt.log 2>&1 \
      || { DEBIAN_FRONTEND=noninteractive apt-get update -q >>/tmp/fptrack-apt.log 2>&1 \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$font" >>/tmp/fptrack-apt.log 2>&1; }; then
      break
    fi
  done
  has_cjk_font || say "could not install a CJK font (see /tmp/fptrack-apt.log): Chinese shows as boxes in screenshots and PDFs"
else
  say "no CJK font (apt-get install fonts-wqy-microhei): Chinese shows as boxes in screenshots and PDFs"
fi
exit 0
