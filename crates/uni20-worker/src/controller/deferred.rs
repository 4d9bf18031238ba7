//! Deferred jobs on the root: work queued until its inputs are ready, run in
//! submission order (program order of submission is causal order), and the
//! loops that drive the job forward ([`Controller::progress`],
//! [`Controller::drain`], [`Controller::wait_until`]).

use crate::diag::JobError;

use super::Controller;

/// Most operations queued or in flight before [`Controller::defer`] waits
/// for replies (back-pressure on a root that submits faster than the ranks
/// compute).
pub(crate) const MAX_OUTSTANDING: usize = 256;

/// Work deferred until its inputs are ready (see the module docs).
pub trait DeferredJob<'c> {
    /// True once every input of the job is available (or failed).
    fn ready(&self) -> bool;
    /// Runs the job (typically: plan and [`Controller::submit_nowait`]).
    fn run(self: Box<Self>, ctl: &Controller<'c>);
    /// Called instead of `run` when the job can never run (its inputs are
    /// never written); the job should fail its outputs with `error`.
    fn abandon(self: Box<Self>, error: JobError);
}

impl<'a> Controller<'a> {
    /// Collects every reply that has already arrived and runs the deferred
    /// jobs that became ready; never blocks.
    ///
    /// # Errors
    /// The first failure (fail-stop).
    pub fn progress(&self) -> Result<(), JobError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        self.pump_replies()?;
        self.run_ready_jobs();
        match self.stopped() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    /// Runs everything submitted so far to completion: every deferred job
    /// and every operation in flight.
    ///
    /// # Errors
    /// The first failure (fail-stop), or [`JobError::Protocol`] if deferred
    /// jobs wait for inputs that nothing will write.
    pub fn drain(&self) -> Result<(), JobError> {
        loop {
            self.run_ready_jobs();
            if let Some(e) = self.stopped() {
                self.abandon_jobs(&e);
                return Err(e);
            }
            if !self.inflight.borrow().is_empty() {
                self.recv_one_reply()?;
                continue;
            }
            if self.deferred.borrow().is_empty() {
                return Ok(());
            }
            // Jobs wait, nothing is in flight: their inputs will never be written.
            let e = JobError::Protocol(format!(
                "{} deferred operation(s) wait for inputs that nothing will produce",
                self.deferred.borrow().len()
            ));
            self.abandon_jobs(&e);
            return Err(e);
        }
    }
    /// Drives the job (deferred jobs, replies of operations in flight) until
    /// `cond` holds.
    ///
    /// # Errors
    /// The first failure (fail-stop), or [`JobError::Protocol`] if `cond`
    /// can never become true (nothing is in flight and no deferred job can
    /// run).
    pub fn wait_until(&self, cond: impl Fn() -> bool) -> Result<(), JobError> {
        loop {
            self.run_ready_jobs();
            if cond() {
                return Ok(());
            }
            if let Some(e) = self.stopped() {
                self.abandon_jobs(&e);
                return Err(e);
            }
            if self.inflight.borrow().is_empty() {
                return Err(JobError::Protocol(format!(
                    "waiting for a value that nothing will produce ({} deferred job(s) blocked)",
                    self.deferred.borrow().len()
                )));
            }
            self.recv_one_reply()?;
        }
    }
    /// Queues a job that runs (in submission order) once its inputs are
    /// ready; runs it at once if it already is and nothing is queued before it.
    ///
    /// Back-pressure: while `MAX_OUTSTANDING` (256) or more operations are
    /// queued or in flight, this first collects replies (and runs the jobs
    /// they make ready), so a program that submits faster than the ranks
    /// compute keeps a bounded window of work on the root instead of an
    /// ever-growing queue.
    pub fn defer(&self, job: Box<dyn DeferredJob<'a> + 'a>) {
        while self.deferred.borrow().len() + self.inflight.borrow().len() >= MAX_OUTSTANDING
            && !self.inflight.borrow().is_empty()
            && self.stopped().is_none()
        {
            if self.recv_one_reply().is_err() {
                break;
            }
            self.run_ready_jobs();
        }
        if let Some(e) = self.stopped() {
            job.abandon(e);
            return;
        }
        self.deferred.borrow_mut().push_back(job);
        self.run_ready_jobs();
    }
    pub(super) fn abandon_jobs(&self, e: &JobError) {
        let jobs: Vec<_> = self.deferred.borrow_mut().drain(..).collect();
        for j in jobs {
            j.abandon(JobError::Stopped(e.to_string()));
        }
    }
    /// Runs queued jobs from the front while they are ready (FIFO: a job
    /// never overtakes an earlier one).
    pub(super) fn run_ready_jobs(&self) {
        if self.running_jobs.replace(true) {
            return; // a job is running and submitting: no re-entry
        }
        loop {
            let job = {
                let mut q = self.deferred.borrow_mut();
                match q.front() {
                    Some(j) if j.ready() => q.pop_front(),
                    _ => None,
                }
            };
            match job {
                Some(j) => match self.stopped() {
                    Some(e) => j.abandon(e),
                    None => self.run_job_timed(j),
                },
                None => break,
            }
        }
        self.running_jobs.set(false);
    }
}
