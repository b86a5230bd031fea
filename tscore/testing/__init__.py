"""Test suites that tscore ships for backend authors (they need pytest; tscore itself never imports them)."""
