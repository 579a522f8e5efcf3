"""Numba kernels: ndarrays and scalars in and out, nothing else.

This is the only package of aonkit that uses Numba. Public wrappers elsewhere
validate input, convert tables to arrays and call these kernels.
"""
