"""Tests of the in-container runtime (launchbay.runtime): contract, launchers, real jobs."""
