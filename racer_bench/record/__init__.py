"""The record format of a run folder: written while a run goes on, read by the results side."""
