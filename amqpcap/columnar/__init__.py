"""Rows gathered as typed columns (`columns`) and laid out the way Arrow lays them (`arrow_layout`)."""
