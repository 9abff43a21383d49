"""Counterfactual budget values, and the gates trained from them."""
