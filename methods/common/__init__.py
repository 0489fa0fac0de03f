"""What the drafters share: draft trees and vocabularies, datastores, n-gram and suffix indexes,
SAM corpora, calibration and the model drafters' heads."""
