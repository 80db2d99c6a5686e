"""The sans-I/O core: types, states, hashing, registry, dispatch planning, binding and guards.

Nothing in this package performs I/O, awaits, reads the wall clock or imports an adapter, store,
transport or CLI module. Time and ids are passed in.
"""
