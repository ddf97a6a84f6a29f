"""Pure evaluation: typed inputs + compiled rules → a plan. No I/O, no templates."""
