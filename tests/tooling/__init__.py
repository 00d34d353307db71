"""Tests of the course tooling (scripts/), the notebooks as committed, the site, the workshop kit and releases."""
