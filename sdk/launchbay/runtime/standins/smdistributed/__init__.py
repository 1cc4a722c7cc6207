"""launchbay's local stand-in for SageMaker's ``smdistributed`` (data parallel only).

Put on the path only inside local launchbay jobs where the real library is not
importable; see docs/smddp.md.
"""

#: Marks this package as launchbay's stand-in, not the library SageMaker ships.
LAUNCHBAY_STANDIN = True
