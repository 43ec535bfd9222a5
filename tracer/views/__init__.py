"""Everything that draws or prints: the text after `trace analyze`, the timeline's layout, the
plots (plots/) and the HTML report (report/)."""
