"""pipeline/instrument"""
