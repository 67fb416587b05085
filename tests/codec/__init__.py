"""Tests of the shared message codec (codec/), pure and compiled."""
