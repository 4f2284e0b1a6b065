//! Policies x seeds x pod lists (filled in below).
