"""`specreason bench agreement`: the agreement rules read on labelled draft steps (no server)."""
