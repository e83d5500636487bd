import fc from 'fast-check';

/** One seed for every property test in a mutation run, so a kill or a survival is reproducible. */
fc.configureGlobal({ seed: 20261201 });
