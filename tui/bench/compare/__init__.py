"""``infertop compare``: two reports side by side, as ratios with bootstrap
intervals, and where they were measured."""
