import fc from 'fast-check';

// Mutation runs compare a mutant's test results with the unmutated run: the same inputs every time.
fc.configureGlobal({ seed: 20261201 });
