//! Plots (filled in below).
