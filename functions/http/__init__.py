"""HTTP for the API function: routes, request parsing, callers' identities, the error map and
the console's page.
"""
