"""One campaign of passes: a case in one pass, the campaign, the schedule of timed turns, untimed
jobs side by side, progress lines, the host probe, and what a case collects over the passes
(its outcome and record)."""
