"""Reports people look at: the nightly HTML report, comparisons of GPUs or software
versions, and projections onto unmeasured hardware. Self-contained HTML with inline SVG
charts, written under <lake>/reports/."""
